// Catch2's console reporter wraps a failing test's name at the console width, indenting the
// continuation lines after the name's first ": ". A colon near the end of the first line leaves
// a width of one or two, and Catch 2.13.10 then writes "-" lines without end (a test log of 77 GB
// in session 44). Wide enough that no test name wraps.
#define CATCH_CONFIG_CONSOLE_WIDTH 400
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
