#pragma once
/// @file dashboard.hpp
/// The dashboard page `tessera serve` answers `GET /` and `GET /dashboard` with (docs/api.md):
/// runtime/service/http/dashboard.html, compiled into the binary at build time
/// (cmake/EmbedFile.cmake), so the server needs no file beside it. The page is self-contained
/// (style and script inline, no other host) and holds no secret: its script reads the bearer token
/// from the URL fragment (docs/design.md, "Dashboard and watch").

#include <string_view>

namespace tessera::http {

/// The page's bytes (UTF-8 HTML), exactly those of runtime/service/http/dashboard.html at build
/// time.
std::string_view dashboard_page();

}  // namespace tessera::http
