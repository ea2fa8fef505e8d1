// HttpConn: the state of one client connection of the event loop (event_loop.h). The loop owns
// connections; a handler sees one while it handles its request, and a worker thread has one to
// itself while it is taken over (a blob transfer). Ownership: created and deleted by the loop;
// while taken over only the worker thread touches it, and it goes back to the loop through the
// completion queue.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/native/http/http_exchange.h"
#include "coordinator/native/http/http_parser.h"
#include "coordinator/native/http/http_transport.h"

namespace gleaner::native {

struct HttpConn {
  enum class State {
    kHead,      // reading a request head (or idle between requests)
    kBody,      // reading an API request's body
    kWaiting,   // the handler works on the request (e.g. a database batch); it answers later
    kFlushing,  // the response is being written
    kDetached,  // taken over by a worker thread (a blob transfer)
    kLinger,    // response sent and write side shut: discarding what the client still sends
  };

  HttpConn(int fd, SSL_CTX* ctx, const http::Limits& limits) : transport(fd, ctx), parser(limits) {}

  Transport transport;
  State state = State::kHead;
  http::RequestParser parser;
  http::BodyDecoder decoder;

  std::string in;  // received bytes not parsed yet (from in_pos)
  size_t in_pos = 0;
  std::string out;  // response bytes not written yet (from out_pos)
  size_t out_pos = 0;

  std::string peer_addr;       // the client's address as accepted ("" if not IP)
  RequestMeta meta;            // of the request being handled
  std::string body;            // the request's body, once read (kWaiting)
  int64_t max_body = 0;        // the handler's limit for this request's body
  bool keep_alive = true;      // the connection stays open after this response
  bool readable = false;       // bytes (or EOF) may be waiting on the socket
  bool linger = false;         // after this response: shut the write side, drop what still comes
  bool closed = false;         // the transport is closed; the object is freed by the loop later
  bool dead = false;           // closed while kWaiting: deleted when the handler's Post comes
  bool queued = false;         // in the loop's list of connections to read and parse again
  bool peer_closed = false;    // the client shut its side: read on until EOF
  bool continue_sent = false;  // the output being flushed is a 100 Continue, then the body

  int64_t idle_since_ms = 0;     // became idle (accepted, or last response written)
  int64_t head_started_ms = -1;  // first byte of the current request head, -1: none yet
  int64_t progress_ms = 0;       // last time bytes moved in either direction
  int64_t lingered = 0;          // bytes discarded while lingering
  size_t index = 0;              // position in the loop's connection list
};

}  // namespace gleaner::native
