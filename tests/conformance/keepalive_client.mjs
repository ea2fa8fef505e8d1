// A lean HTTP/1.1 client for load: one keep-alive TCP connection, one request at a time.
//
// fetch() costs a load generator more CPU per request than the Worker it measures spends, and
// on a 2-core machine the two compete; this client writes the request bytes itself and parses
// only the status line, Content-Length or chunked framing, and the body.
//
//   const c = new Connection("127.0.0.1", port);
//   const { status, body } = await c.request("POST", "/v1/work", { authorization: "..." }, "{}");
//   c.close();
//
// A transport error (reset, close mid-response) rejects the pending request; the next request
// opens a new connection.
import { connect } from "node:net";

const CRLF2 = Buffer.from("\r\n\r\n");

export class Connection {
  constructor(host, port) {
    this.host = host;
    this.port = port;
    this.socket = null;
    this.pending = null; // {resolve, reject}
    this.buffer = Buffer.alloc(0);
  }

  open() {
    const socket = connect({ host: this.host, port: this.port, noDelay: true });
    socket.on("data", (chunk) => {
      this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
      this.parse();
    });
    const fail = (e) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.buffer = Buffer.alloc(0);
      const p = this.pending;
      this.pending = null;
      if (p) p.reject(e ?? new Error("connection closed"));
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("connection closed by the server")));
    this.socket = socket;
  }

  // Resolves {status, headers (lowercase names), body (string)}.
  request(method, path, headers = {}, body = "") {
    if (this.pending) throw new Error("one request at a time per connection");
    if (!this.socket) this.open();
    const payload = Buffer.from(body);
    let head = `${method} ${path} HTTP/1.1\r\nhost: ${this.host}:${this.port}\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    head += `content-length: ${payload.length}\r\n\r\n`;
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(payload.length ? Buffer.concat([Buffer.from(head), payload]) : head);
    });
  }

  parse() {
    if (!this.pending) return;
    const end = this.buffer.indexOf(CRLF2);
    if (end < 0) return;
    const lines = this.buffer.subarray(0, end).toString("latin1").split("\r\n");
    const status = Number(lines[0].split(" ")[1]);
    const headers = {};
    for (let i = 1; i < lines.length; i++) {
      const colon = lines[i].indexOf(":");
      headers[lines[i].slice(0, colon).trim().toLowerCase()] = lines[i].slice(colon + 1).trim();
    }
    let at = end + 4;
    let body;
    if (headers["transfer-encoding"]?.includes("chunked")) {
      const parts = [];
      for (;;) {
        const eol = this.buffer.indexOf("\r\n", at);
        if (eol < 0) return;
        const size = parseInt(this.buffer.subarray(at, eol).toString("latin1"), 16);
        if (this.buffer.length < eol + 2 + size + 2) return;
        if (size === 0) {
          at = eol + 4;
          break;
        }
        parts.push(this.buffer.subarray(eol + 2, eol + 2 + size));
        at = eol + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    } else {
      const length = Number(headers["content-length"] ?? 0);
      if (this.buffer.length < at + length) return;
      body = this.buffer.subarray(at, at + length);
      at += length;
    }
    this.buffer = this.buffer.subarray(at);
    const p = this.pending;
    this.pending = null;
    if (headers.connection === "close") {
      this.socket.destroy();
      this.socket = null;
    }
    p.resolve({ status, headers, body: body.toString("utf8") });
  }

  close() {
    if (this.socket) this.socket.destroy();
    this.socket = null;
  }
}
