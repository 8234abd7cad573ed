// Status and Result<T>: the error values prefixd's public API returns instead of throwing.
// Plain values with no shared state: any thread may create, copy and read them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace prefixd {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // the caller passed something the API or the server cannot accept
  kNotFound,           // the named thing does not exist
  kOutOfRange,         // a size or offset beyond what the data or the buffer allows
  kCorruption,         // malformed bytes: a state blob, a log record
  kIoError,            // a socket or file operation failed
  kTimeout,            // a socket operation waited longer than its timeout
  kUnavailable,        // no usable connection: not connected, closed, or broken by an earlier error
  kProtocolError,      // the peer sent bytes that break the wire protocol
  kServerError,        // the server answered with an error reply; the message is its text
  kAborted,            // the data changed underneath a multi-step operation
  kResourceExhausted,  // out of memory, or over a configured limit
  kInternal,           // a bug in prefixd
};

constexpr std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kOutOfRange:
      return "OutOfRange";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kTimeout:
      return "Timeout";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kProtocolError:
      return "ProtocolError";
    case StatusCode::kServerError:
      return "ServerError";
    case StatusCode::kAborted:
      return "Aborted";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

// A code and a human-readable message; the default-constructed Status is OK.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status ProtocolError(std::string m) { return {StatusCode::kProtocolError, std::move(m)}; }
  static Status ServerError(std::string m) { return {StatusCode::kServerError, std::move(m)}; }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK", or "<CodeName>: <message>".
  std::string ToString() const {
    if (ok()) return "OK";
    std::string out(StatusCodeName(code_));
    out += ": ";
    out += message_;
    return out;
  }

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

namespace internal {
[[noreturn]] inline void DieOnBadResultAccess(const Status& status) {
  std::fprintf(stderr, "prefixd: value() called on a failed Result: %s\n",
               status.ToString().c_str());
  std::abort();
}
}  // namespace internal

// Either a T or a non-OK Status. Reading the value of a failed Result aborts the process, so
// check ok() first.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit from anything T can be built from, so `return value;` and `return std::nullopt;`
  // work in functions returning Result<T>.
  template <typename U = T>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::remove_cvref_t<U>, Result> &&
           !std::is_same_v<std::remove_cvref_t<U>, Status>) Result(U&& value)
      : data_(std::in_place_index<1>, std::forward<U>(value)) {}

  // Implicit from an error, so `return status;` works. An OK status carries no value, which is a
  // bug in the caller; it becomes an Internal error rather than an empty success.
  Result(Status status) : data_(std::in_place_index<0>, std::move(status)) {
    if (std::get<0>(data_).ok()) {
      data_.template emplace<0>(StatusCode::kInternal, "Result built from an OK Status");
    }
  }

  bool ok() const { return data_.index() == 1; }

  const Status& status() const& {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<0>(data_);
  }
  Status status() && { return ok() ? Status() : std::get<0>(std::move(data_)); }

  T& value() & {
    if (!ok()) internal::DieOnBadResultAccess(std::get<0>(data_));
    return std::get<1>(data_);
  }
  const T& value() const& {
    if (!ok()) internal::DieOnBadResultAccess(std::get<0>(data_));
    return std::get<1>(data_);
  }
  T&& value() && {
    if (!ok()) internal::DieOnBadResultAccess(std::get<0>(data_));
    return std::get<1>(std::move(data_));
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> data_;
};

}  // namespace prefixd

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define PREFIXD_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::prefixd::Status prefixd_status_ = (expr);        \
    if (!prefixd_status_.ok()) return prefixd_status_; \
  } while (false)

// `lhs = value of expr`, or returns its Status from the enclosing function when it failed.
#define PREFIXD_ASSIGN_OR_RETURN(lhs, expr) \
  PREFIXD_ASSIGN_OR_RETURN_IMPL_(PREFIXD_CONCAT_(prefixd_result_, __LINE__), lhs, expr)
#define PREFIXD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()
#define PREFIXD_CONCAT_(a, b) PREFIXD_CONCAT_INNER_(a, b)
#define PREFIXD_CONCAT_INNER_(a, b) a##b
