#pragma once
/// @file request_reader.hpp
/// Reads requests out of a connection's bytes, one after another (keep-alive, pipelining),
/// with Beast's parser under the server's limits. The server feeds it what each socket read
/// returns; the fuzz target (fuzz/fuzz_http.cpp) feeds it arbitrary bytes, so both run this
/// code. It owns no socket and no thread.
///
/// What it refuses, and with which status (the connection is then answered and closed):
/// a header (request line included) over limits::max_header bytes: 431; a body over
/// limits::max_body: 413, seen from Content-Length before any body byte is read, and while
/// reading for a chunked body; a method not in limits::methods: 405; anything Beast's parser
/// refuses, a target not in origin form or a bad query string: 400. The token is checked by
/// check_access below once the header is done.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/service/http/message.hpp"

namespace tessera::http {

class request_reader {
 public:
  /// Where the request being read stands after feed().
  enum class stage {
    need_more,    ///< incomplete: feed more bytes
    header_done,  ///< the header just completed and passed (returned once per request):
                  ///< head() and authorization() are valid; feed({}) goes on with the body
    complete,     ///< a whole request: take() it
    failed,       ///< refused: failure() says how to answer; the connection must close
  };

  explicit request_reader(const limits& l);
  ~request_reader();
  request_reader(const request_reader&) = delete;
  request_reader& operator=(const request_reader&) = delete;

  /// Appends `bytes` to what is buffered and parses as far as they go. Once complete or
  /// failed, further bytes are only buffered.
  stage feed(std::string_view bytes);

  /// The request so far: valid from header_done on (its body only once complete); when
  /// failed, its method is set if the request line was read.
  const request& head() const { return req_; }
  /// The Authorization header's value ("" when absent); kept out of request::headers.
  const std::string& authorization() const { return authorization_; }
  /// True when the client asked to keep the connection open after the response.
  bool keep_alive() const { return keep_alive_; }
  /// True when the header announces a body (Content-Length over 0, or chunked).
  bool has_body() const { return has_body_; }
  /// True when the client sent `Expect: 100-continue` and waits for it before the body.
  bool expects_continue() const { return expect_continue_; }
  /// How the request was refused (valid when failed).
  const refusal& failure() const { return failure_; }
  /// The complete request; the reader then starts on the next one with the bytes left over.
  request take();
  /// Bytes buffered and not yet parsed (the start of a pipelined next request).
  std::size_t buffered() const { return buf_.size(); }

 private:
  struct parser_box;
  stage parse();
  void start_request();
  void on_header();
  stage fail(int status, std::string message);

  limits limits_;
  std::unique_ptr<parser_box> parser_;
  std::string buf_;                  ///< bytes received and not yet consumed by the parser
  std::size_t header_consumed_ = 0;  ///< header bytes of this request the parser consumed
  bool header_seen_ = false;
  stage stage_ = stage::need_more;
  request req_;
  std::string authorization_;
  bool keep_alive_ = false;
  bool has_body_ = false;
  bool expect_continue_ = false;
  refusal failure_;
};

/// The server's check of a request whose header is done (stage header_done), before any body
/// byte is read: a public request (is_public) may carry no body (413), so clients without the
/// token cannot make the server hold a body; any other needs the token (401). First of all,
/// the Host header must name the server (limits::hosts, its port `port`): 421 otherwise.
std::optional<refusal> check_access(const request_reader& r, const limits& l,
                                    std::string_view token, std::uint16_t port);

}  // namespace tessera::http
