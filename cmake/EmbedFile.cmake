# EmbedFile.cmake -- a file's bytes compiled into a function returning them.
#
# Included (the top-level CMakeLists.txt), it defines
#   tessera_embed_file(OUTPUT <generated .cpp> INPUT <file> HEADER <include path>
#                      NAMESPACE <ns> FUNCTION <name>)
# which adds a build-time step writing OUTPUT: a source defining
#   std::string_view <ns>::<name>()   (declared in HEADER)
# that returns INPUT's bytes exactly. The step depends on INPUT and this script, so editing
# the file rebuilds what embeds it; nothing is generated at configure time.
#
# Run as a script (cmake -DINPUT=.. -DOUTPUT=.. -DHEADER=.. -DNAMESPACE=.. -DFUNCTION=..
# -P EmbedFile.cmake), it writes OUTPUT: that is the build-time step.

if(CMAKE_SCRIPT_MODE_FILE)
  foreach(var INPUT OUTPUT HEADER NAMESPACE FUNCTION)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "EmbedFile.cmake: -D${var}=... is missing")
    endif()
  endforeach()
  # Hex, so every byte (quotes, backslashes, NUL, non-ASCII) survives as it is.
  file(READ "${INPUT}" hex HEX)
  string(LENGTH "${hex}" digits)
  math(EXPR size "${digits} / 2")
  # 0x.. initialisers, 16 bytes a line; one 0 after the last byte, so an empty file still
  # gives a valid array (the size returned leaves it out).
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line)   # CMake's regex has no {16}
  string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
  get_filename_component(root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
  file(RELATIVE_PATH shown "${root}" "${INPUT}")
  set(text "// Generated at build time from ${shown} by cmake/EmbedFile.cmake: edit that file.
#include \"${HEADER}\"

namespace {
const unsigned char embedded_bytes[] = {
    ${bytes}0x00};
}  // namespace

namespace ${NAMESPACE} {
std::string_view ${FUNCTION}() {
  return {reinterpret_cast<const char*>(embedded_bytes), ${size}};
}
}  // namespace ${NAMESPACE}
")
  file(WRITE "${OUTPUT}" "${text}")
  return()
endif()

set(TESSERA_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")

function(tessera_embed_file)
  cmake_parse_arguments(arg "" "OUTPUT;INPUT;HEADER;NAMESPACE;FUNCTION" "" ${ARGN})
  add_custom_command(
    OUTPUT "${arg_OUTPUT}"
    COMMAND "${CMAKE_COMMAND}" "-DINPUT=${arg_INPUT}" "-DOUTPUT=${arg_OUTPUT}"
            "-DHEADER=${arg_HEADER}" "-DNAMESPACE=${arg_NAMESPACE}" "-DFUNCTION=${arg_FUNCTION}"
            -P "${TESSERA_EMBED_SCRIPT}"
    DEPENDS "${arg_INPUT}" "${TESSERA_EMBED_SCRIPT}"
    COMMENT "Embedding ${arg_INPUT}"
    VERBATIM)
endfunction()
