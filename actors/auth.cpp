#include "actors/auth.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::actors {

namespace {

error io_error(const std::string& path, const std::string& what) {
  return error{error_kind::io, path + ": " + what};
}

/// Reads at most `limit` bytes of an open descriptor.
std::string read_bounded(int fd, std::size_t limit) {
  std::string data;
  char buf[256];
  while (data.size() <= limit) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  return data;
}

}  // namespace

result<std::vector<std::uint8_t>> random_bytes(std::size_t n) {
  std::vector<std::uint8_t> out(n);
  if (RAND_bytes(out.data(), static_cast<int>(n)) != 1)
    return error{error_kind::internal, "the system's random source failed (RAND_bytes)"};
  return out;
}

result<secret_key> make_secret() { return random_bytes(secret_bytes); }

std::string to_hex(const std::vector<std::uint8_t>& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

result<std::vector<std::uint8_t>> from_hex(const std::string& hex) {
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0)
    return error{error_kind::invalid_input, "odd number of hexadecimal digits"};
  std::vector<std::uint8_t> out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return error{error_kind::invalid_input,
                   "not a hexadecimal digit at offset " + std::to_string(hi < 0 ? i : i + 1)};
    out.push_back(static_cast<std::uint8_t>(hi * 16 + lo));
  }
  return out;
}

status write_secret_file(const std::string& path, const secret_key& key) {
  // O_EXCL|O_NOFOLLOW: never write through a file or link someone else put there.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return io_error(path, std::string("cannot create the secret file: ") + std::strerror(errno));
  const std::string text = to_hex(key) + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int closed = ::close(fd);
  if (!ok || closed != 0) return io_error(path, "cannot write the secret file");
  return {};
}

result<secret_key> read_secret_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return io_error(path, std::string("cannot open the secret file: ") + std::strerror(errno));
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ::close(fd);
    return error{error_kind::invalid_input, path + ": the secret file is not a regular file"};
  }
  if ((sb.st_mode & 077) != 0) {
    ::close(fd);
    return error{error_kind::invalid_input,
                 path + ": the secret file may be read or written by others; chmod 600 it"};
  }
  if (sb.st_uid != ::geteuid()) {  // another user's secret would let that user in
    ::close(fd);
    return error{error_kind::invalid_input,
                 path + ": the secret file is owned by uid " + std::to_string(sb.st_uid) +
                     ", not by this user (uid " + std::to_string(::geteuid()) + ")"};
  }
  std::string text = read_bounded(fd, 4 * secret_bytes);
  ::close(fd);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  if (text.size() != 2 * secret_bytes)
    return error{error_kind::invalid_input, path + ": a secret file holds " +
                                                std::to_string(2 * secret_bytes) +
                                                " hexadecimal digits, this one " +
                                                std::to_string(text.size()) + " characters"};
  auto key = from_hex(text);
  if (!key) return error{error_kind::invalid_input, path + ": " + key.err().message};
  return std::move(*key);
}

std::vector<std::uint8_t> proof_of(const secret_key& key, const std::vector<std::string>& parts) {
  std::string message;
  for (const auto& p : parts) {
    const auto n = static_cast<std::uint32_t>(p.size());
    for (int i = 0; i < 4; ++i) message.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    message += p;
  }
  std::vector<std::uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &len);
  mac.resize(len);
  return mac;
}

bool same_proof(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tessera::actors
