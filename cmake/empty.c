/* libtbc.so is the static library's objects, linked whole (CMakeLists.txt). */
