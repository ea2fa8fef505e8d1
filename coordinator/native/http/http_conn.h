// HttpConn: the state of one client connection of the event-loop front end. Internal to the HTTP
// front end (http_server.cc owns connections; blob_transfer.cc borrows one while it streams a
// blob). Ownership: created and deleted by the loop; while detached for a blob transfer only the
// worker thread touches it, and it goes back to the loop through the completion queue.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/core/coordinator.h"
#include "coordinator/core/plan.h"
#include "coordinator/native/http/http_exchange.h"
#include "coordinator/native/http/http_parser.h"
#include "coordinator/native/http/http_transport.h"

namespace gleaner::native {

struct HttpConn {
  enum class State {
    kHead,      // reading a request head (or idle between requests)
    kBody,      // reading an API request's body
    kRunning,   // the core's plan waits for a database batch
    kFlushing,  // the response is being written
    kDetached,  // a worker thread streams a blob on it
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

  RequestMeta meta;            // of the request being handled
  core::BlobGrant blob_grant;  // a blob request's URL as the loop checked it (PUT or GET)
  std::string body;            // an API request's body
  core::Plan plan = core::Plan::Respond(core::HttpResponse());  // the request's plan (kRunning)
  bool keep_alive = true;      // the connection stays open after this response
  bool readable = false;       // bytes (or EOF) may be waiting on the socket
  bool linger = false;         // after this response: shut the write side, drop what still comes
  bool closed = false;         // the transport is closed; the object is freed by the loop later
  bool dead = false;           // closed while a batch was in flight: deleted when it completes
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
