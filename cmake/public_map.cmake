# Writes the linker version script of libtbc.so from include/tbc/tbc.h: every
# function the header declares is exported, nothing else (the library's
# internal tbc_* functions stay local).  The header is the one list.
# usage: cmake -DHEADER=... -DOUT=... -P public_map.cmake
file(STRINGS "${HEADER}" lines REGEX "^[A-Za-z].*[ *]tbc_[a-z0-9_]+\\(")
set(names)
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^.*[ *](tbc_[a-z0-9_]+)\\(.*$" "\\1" name "${line}")
  list(APPEND names "${name}")
endforeach()
list(REMOVE_DUPLICATES names)
list(SORT names)
set(text "/* Generated from include/tbc/tbc.h by cmake/public_map.cmake. */\n{\n  global:\n")
foreach(name IN LISTS names)
  string(APPEND text "    ${name};\n")
endforeach()
string(APPEND text "  local:\n    *;\n};\n")
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
