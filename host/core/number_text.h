// number_text.h — one number as printf writes it ("%.2f", "%+.1f", "%g"), for the lines the
// commands print (conform, project). Header-only, so that the libraries that link no core (project)
// can use it; pure, safe from any thread.
#pragma once

#include <cstdio>
#include <string>

namespace dlhost {

// `format` takes one double; the text is cut at 63 characters (a number is far shorter).
inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

}  // namespace dlhost
