// NVRTC compiles in helper processes: the wire format, the worker's serving loop and the
// process-wide pool of workers (see compile_worker.h).
#include "runtime/compile_worker.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "ir/error.h"
#include "runtime/logging.h"

extern char** environ;

namespace adjoint::runtime {
namespace {

// --- wire format: a message is a u64 byte count and that many bytes of fields ---------------

void put_u64(std::string& out, uint64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
void put_string(std::string& out, const std::string& text) {
  put_u64(out, text.size());
  out += text;
}

struct Reader {
  const std::string& bytes;
  size_t at = 0;
  bool ok = true;
  uint64_t u64() {
    uint64_t value = 0;
    if (bytes.size() - at < sizeof value) {
      ok = false;
      return 0;
    }
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
    return value;
  }
  std::string string() {
    const uint64_t size = u64();
    if (!ok || bytes.size() - at < size) {
      ok = false;
      return "";
    }
    std::string text = bytes.substr(at, size);
    at += size;
    return text;
  }
};

bool write_all(int fd, const std::string& message) {
  std::string framed;
  put_u64(framed, message.size());
  framed += message;
  size_t done = 0;
  while (done < framed.size()) {
    // send with MSG_NOSIGNAL: a dead peer must not raise SIGPIPE in this process
    const ssize_t n = send(fd, framed.data() + done, framed.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool read_exactly(int fd, char* out, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> read_message(int fd) {
  uint64_t size = 0;
  if (!read_exactly(fd, reinterpret_cast<char*>(&size), sizeof size)) return std::nullopt;
  if (size > (uint64_t{1} << 34)) return std::nullopt;
  std::string message(size, '\0');
  if (!read_exactly(fd, message.data(), size)) return std::nullopt;
  return message;
}

// --- the pool --------------------------------------------------------------------------------

/// One worker process and this process's end of its socket.
struct Worker {
  pid_t pid = -1;
  int fd = -1;
  void discard() {
    if (fd >= 0) close(fd);
    fd = -1;
    if (pid > 0) {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    pid = -1;
  }
};

std::optional<Worker> spawn_worker(const std::string& executable) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], 0);  // dup2 drops close-on-exec
  // Not this process's stdout: a pipe someone reads to its end must not wait for the workers.
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  const NvrtcLocation& nvrtc = locate_nvrtc();
  std::string path = nvrtc.path, identity = nvrtc.identity;
  std::string exe = executable;
  char nvrtc_flag[] = "--nvrtc", identity_flag[] = "--identity";
  char* argv[] = {exe.data(), nvrtc_flag, path.data(), identity_flag, identity.data(), nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(sockets[1]);
  if (spawned != 0) {
    close(sockets[0]);
    return std::nullopt;
  }
  return Worker{pid, sockets[0]};
}

class WorkerPool {
 public:
  /// An idle worker, or a new one; nullopt when none can be spawned.
  std::optional<Worker> take(const std::string& executable) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      forget_if_forked();
      if (!idle_.empty()) {
        Worker worker = idle_.back();
        idle_.pop_back();
        return worker;
      }
    }
    return spawn_worker(executable);
  }
  void give_back(Worker worker) {
    std::lock_guard<std::mutex> lock(mutex_);
    forget_if_forked();
    idle_.push_back(worker);
  }

 private:
  /// A fork of this process inherits the idle workers' sockets: it must not share them with
  /// its parent (their requests would interleave), so it closes its copies and spawns its own.
  void forget_if_forked() {
    if (owner_ == getpid()) return;
    for (Worker& worker : idle_) close(worker.fd);  // the parent's copies stay open
    idle_.clear();
    owner_ = getpid();
  }

  pid_t owner_ = getpid();
  std::mutex mutex_;
  std::vector<Worker> idle_;  // kept for the life of the process; they exit on EOF
};

WorkerPool& pool() {
  static WorkerPool* instance = new WorkerPool();  // never destroyed: workers outlive exit
  return *instance;
}

void warn_once(const std::string& message) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) logger().warn("{}; compiling in this process instead", message);
}

}  // namespace

bool compile_processes_from_environment() {
  const char* text = std::getenv("ADJOINT_COMPILE_PROCESSES");
  if (text == nullptr || *text == '\0' || std::strcmp(text, "0") == 0) return false;
  if (std::strcmp(text, "1") == 0) return true;
  throw Error(std::string("ADJOINT_COMPILE_PROCESSES: expected 0 (compile on threads of this "
                          "process) or 1 (in adjoint_compile_worker processes), got '") +
                  text + "'",
              ErrorCode::kInvalidArgument);
}

const std::optional<std::string>& compile_worker_executable() {
  static const std::optional<std::string> found = []() -> std::optional<std::string> {
    namespace fs = std::filesystem;
    if (const char* set = std::getenv("ADJOINT_COMPILE_WORKER"); set && *set) {
      if (access(set, X_OK) == 0) return std::string(set);
      return std::nullopt;
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&compile_worker_executable), &info) == 0 ||
        info.dli_fname == nullptr) {
      return std::nullopt;
    }
    std::error_code error;
    const fs::path here = fs::weakly_canonical(fs::path(info.dli_fname), error).parent_path();
    for (const fs::path& candidate :
         {here / "adjoint_compile_worker", here / ".." / "bin" / "adjoint_compile_worker"}) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate.lexically_normal().string();
    }
    return std::nullopt;
  }();
  return found;
}

std::string encode_request(const CompileRequest& request) {
  std::string out;
  put_string(out, request.source);
  put_string(out, request.name);
  put_u64(out, static_cast<uint64_t>(request.arch));
  put_u64(out, request.want_cubin ? 1 : 0);
  put_u64(out, request.also_ptx ? 1 : 0);
  put_u64(out, request.extra_options.size());
  for (const std::string& option : request.extra_options) put_string(out, option);
  return out;
}

std::optional<CompileRequest> decode_request(const std::string& bytes) {
  Reader in{bytes};
  CompileRequest request;
  request.source = in.string();
  request.name = in.string();
  request.arch = static_cast<int>(in.u64());
  request.want_cubin = in.u64() != 0;
  request.also_ptx = in.u64() != 0;
  const uint64_t count = in.u64();
  for (uint64_t i = 0; in.ok && i < count; ++i) request.extra_options.push_back(in.string());
  if (!in.ok || in.at != bytes.size()) return std::nullopt;
  return request;
}

std::string encode_result(const CompileResult& result) {
  std::string out;
  put_u64(out, 0);  // success
  std::string milliseconds(sizeof(double), '\0');
  std::memcpy(milliseconds.data(), &result.milliseconds, sizeof(double));
  put_string(out, milliseconds);
  put_string(out, result.log);
  put_u64(out, result.options.size());
  for (const std::string& option : result.options) put_string(out, option);
  put_string(out, std::string(result.cubin.begin(), result.cubin.end()));
  put_string(out, result.ptx);
  return out;
}

std::string encode_error(int code, const std::string& message) {
  std::string out;
  put_u64(out, 1);  // failure
  put_u64(out, static_cast<uint64_t>(code));
  put_string(out, message);
  return out;
}

int serve_compile_requests(int in_fd, int out_fd) {
  while (std::optional<std::string> message = read_message(in_fd)) {
    std::optional<CompileRequest> request = decode_request(*message);
    std::string answer;
    if (!request) {
      answer = encode_error(static_cast<int>(ErrorCode::kInternal),
                            "adjoint_compile_worker: a malformed request");
    } else {
      try {
        answer = encode_result(Nvrtc::instance().compile(*request));
      } catch (const Error& error) {
        answer = encode_error(static_cast<int>(error.code()), error.what());
      } catch (const std::exception& error) {
        answer = encode_error(static_cast<int>(ErrorCode::kInternal), error.what());
      }
    }
    if (!write_all(out_fd, answer)) return 1;
  }
  return 0;
}

CompileResult compile_in_worker(const CompileRequest& request) {
  const std::optional<std::string>& executable = compile_worker_executable();
  if (!executable) {
    warn_once("ADJOINT_COMPILE_PROCESSES=1 but no adjoint_compile_worker was found beside the "
              "library (set ADJOINT_COMPILE_WORKER)");
    return Nvrtc::instance().compile(request);
  }
  std::optional<Worker> worker = pool().take(*executable);
  if (!worker) {
    warn_once("adjoint_compile_worker (" + *executable + ") could not be spawned");
    return Nvrtc::instance().compile(request);
  }
  std::optional<std::string> answer;
  if (write_all(worker->fd, encode_request(request))) answer = read_message(worker->fd);
  if (!answer) {
    worker->discard();
    warn_once("adjoint_compile_worker (" + *executable + ") exited without an answer");
    return Nvrtc::instance().compile(request);
  }
  pool().give_back(*worker);
  Reader in{*answer};
  if (in.u64() != 0) {
    const auto code = static_cast<ErrorCode>(in.u64());
    throw Error(in.string(), code);
  }
  CompileResult result;
  const std::string milliseconds = in.string();
  if (milliseconds.size() == sizeof(double)) {
    std::memcpy(&result.milliseconds, milliseconds.data(), sizeof(double));
  }
  result.log = in.string();
  const uint64_t count = in.u64();
  for (uint64_t i = 0; in.ok && i < count; ++i) result.options.push_back(in.string());
  const std::string cubin = in.string();
  result.cubin.assign(cubin.begin(), cubin.end());
  result.ptx = in.string();
  if (!in.ok) throw Error("adjoint_compile_worker: a malformed answer", ErrorCode::kInternal);
  return result;
}

}  // namespace adjoint::runtime
