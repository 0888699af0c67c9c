#pragma once
/// @file record_json.hpp
/// A record with a field list (actors/wire.hpp, `fields_of`) as a JSON object: one key per
/// field, in the list's order, so the JSON and CAF's serialisation come from the same list.

#include <nlohmann/json.hpp>

#include "actors/protocol.hpp"

namespace tessera::actors {

/// `x` as a JSON object of type `Json` (nlohmann::json or nlohmann::ordered_json).
template <class Json, class T>
Json json_of_fields(const T& x) {
  Json j = Json::object();
  fields_of(x, [&j](const char*, auto... fs) { ((j[fs.name] = fs.value), ...); });
  return j;
}

}  // namespace tessera::actors
