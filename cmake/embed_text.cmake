# Writes IN (a text file) as a C header defining the string NAME[] holding it.
# usage: cmake -DIN=... -DOUT=... -DNAME=... -P embed_text.cmake
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n\"" text "${text}")
get_filename_component(in_name "${IN}" NAME)
file(WRITE "${OUT}.tmp" "/* Generated from ${in_name} by cmake/embed_text.cmake. */\nstatic const char ${NAME}[] =\n\"${text}\";\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
