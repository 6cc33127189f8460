# embed.cmake: turns INPUT (the dashboard page) into OUTPUT, a C file
# defining squall_dashboard_html[] and squall_dashboard_html_size.
# Run as: cmake -DINPUT=... -DOUTPUT=... -P embed.cmake
file (READ "${INPUT}" hex HEX)
string (LENGTH "${hex}" hex_length)
math (EXPR size "${hex_length} / 2")
# 0xNN, per byte; a line break every 16 bytes keeps compilers happy
string (REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string (REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file (WRITE "${OUTPUT}.tmp"
"/*  Generated from broker/dashboard/index.html by embed.cmake: do not edit. */
#include <stddef.h>
const unsigned char squall_dashboard_html [] = {
${bytes}0x00
};
const size_t squall_dashboard_html_size = ${size};
")
file (RENAME "${OUTPUT}.tmp" "${OUTPUT}")
