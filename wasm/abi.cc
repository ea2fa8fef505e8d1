// The wasm module's C ABI: byte buffers in, one JSON text out (see wasm/edge_session.h).
//
// Protocol for the host (wasm/worker.mjs): gl_alloc(n) a buffer, write UTF-8 JSON into it, call
// an entry point with (ptr, len) — it frees nothing the host allocated — then read the answer at
// gl_out_ptr() with the length the entry point returned; the answer stays valid until the next
// call. gl_free(ptr) releases a gl_alloc buffer. Single-threaded; _initialize() first (reactor).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "wasm/edge_session.h"

namespace {

gleaner::edge::EdgeSession& Session() {
  static gleaner::edge::EdgeSession* session = new gleaner::edge::EdgeSession();
  return *session;
}

std::string& Out() {
  static std::string* out = new std::string();
  return *out;
}

int32_t Answer(std::string text) {
  Out() = std::move(text);
  return int32_t(Out().size());
}

// 32 fresh bytes for a request's ids, tokens and nonces (WASI random_get: the Worker's
// crypto.getRandomValues), or "" if none could be drawn.
std::string Entropy() {
  std::string bytes(32, '\0');
  return getentropy(bytes.data(), bytes.size()) == 0 ? bytes : std::string();
}

std::string In(const char* ptr, int32_t len) {
  if (ptr == nullptr || len <= 0) return std::string();
  return std::string(ptr, size_t(len));
}

}  // namespace

#define GL_EXPORT(name) extern "C" __attribute__((export_name(#name)))

GL_EXPORT(gl_alloc) void* gl_alloc(int32_t size) {
  return std::malloc(size_t(size > 0 ? size : 1));
}
GL_EXPORT(gl_free) void gl_free(void* ptr) {
  std::free(ptr);
}
GL_EXPORT(gl_out_ptr) const char* gl_out_ptr() {
  return Out().data();
}

// Returns the length of the answer: "" when the configuration was accepted, else the error.
GL_EXPORT(gl_init) int32_t gl_init(const char* ptr, int32_t len) {
  return Answer(Session().Init(In(ptr, len)));
}

GL_EXPORT(gl_start) int32_t gl_start(const char* ptr, int32_t len) {
  return Answer(Session().Start(In(ptr, len), Entropy()));
}

GL_EXPORT(gl_continue) int32_t gl_continue(int32_t handle, const char* ptr, int32_t len) {
  return Answer(Session().Continue(handle, In(ptr, len)));
}

GL_EXPORT(gl_drop) void gl_drop(int32_t handle) {
  Session().Drop(handle);
}

GL_EXPORT(gl_open_plans) int32_t gl_open_plans() {
  return int32_t(Session().open_plans());
}

GL_EXPORT(gl_authorize_blob) int32_t gl_authorize_blob(const char* ptr, int32_t len) {
  return Answer(Session().AuthorizeBlob(In(ptr, len)));
}

// The settings table (EdgeSession::Settings); the input is ignored.
GL_EXPORT(gl_settings) int32_t gl_settings(const char*, int32_t) {
  return Answer(Session().Settings());
}

GL_EXPORT(gl_blob) int32_t gl_blob(const char* ptr, int32_t len) {
  return Answer(Session().Blob(In(ptr, len)));
}
