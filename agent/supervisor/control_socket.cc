#include "agent/supervisor/control_socket.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "agent/supervisor/log.h"

namespace gleaner::agent {
namespace {

bool MakeAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof addr->sun_path) return false;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

// Reads until '\n' (not included), EOF, `max` bytes or the deadline.
bool ReadLine(int fd, std::string* out, size_t max, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  for (;;) {
    size_t nl = out->find('\n');
    if (nl != std::string::npos) {
      out->resize(nl);
      return true;
    }
    if (out->size() > max) return false;
    double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, int(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return !out->empty();
    out->append(buf, size_t(n));
  }
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

int Connect(const std::string& path, int* err) {
  sockaddr_un addr;
  if (!MakeAddress(path, &addr)) {
    *err = ENAMETOOLONG;
    return -1;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *err = errno;
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

ControlServer::~ControlServer() {
  Stop();
}

Status ControlServer::Start(const std::string& path, Handler handler) {
  sockaddr_un addr;
  if (!MakeAddress(path, &addr)) return Status::Invalid("control socket path too long: " + path);
  int err = 0;
  int probe = Connect(path, &err);
  if (probe >= 0) {
    close(probe);
    return Status::Conflict("another agent is serving " + path);
  }
  unlink(path.c_str());  // a stale socket of an agent that is gone
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  // The state dir is 0700; chmod narrows the socket itself to 0600 before it accepts anything.
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd_, 8) != 0) {
    Status s = Status::Internal("control socket " + path + ": " + std::strerror(errno));
    close(fd_);
    fd_ = -1;
    return s;
  }
  path_ = path;
  handler_ = std::move(handler);
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void ControlServer::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  shutdown(fd_, SHUT_RDWR);
  thread_.join();
  close(fd_);
  fd_ = -1;
  unlink(path_.c_str());
}

void ControlServer::Loop() {
  while (!stop_) {
    // Blocks until a client connects; Stop()'s shutdown() wakes it (no periodic wake-ups).
    int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno != EINTR && errno != ECONNABORTED && !stop_) poll(nullptr, 0, 100);
      continue;
    }
    ucred cred;
    socklen_t len = sizeof cred;
    std::string line;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != getuid() && cred.uid != 0)) {
      WriteAll(c, "{\"error\":\"permission denied\"}\n");
    } else if (ReadLine(c, &line, 256, 2.0)) {
      WriteAll(c, handler_(line) + "\n");
    }
    close(c);
  }
}

Result<std::string> ControlRequest(const std::string& path, const std::string& command,
                                   double timeout_s) {
  int err = 0;
  int fd = Connect(path, &err);
  if (fd < 0) {
    if (err == EACCES || err == EPERM) {
      return Status(Code::kPermissionDenied, "cannot open " + path + ": " + std::strerror(err) +
                                                 " (run as the agent's user)");
    }
    return Status::Unavailable("no agent is running (" + path + ": " + std::strerror(err) + ")");
  }
  std::string answer;
  bool ok = WriteAll(fd, command + "\n") && ReadLine(fd, &answer, 1 << 20, timeout_s);
  close(fd);
  if (!ok) return Status::Unavailable("the agent did not answer on " + path);
  return answer;
}

}  // namespace gleaner::agent
