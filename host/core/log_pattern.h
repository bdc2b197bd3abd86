// log_pattern.h — how dlhost's log lines look (spdlog's pattern): the host's own, the plugins'
// (through the host API) and a case worker's, which the parent shows as the worker wrote them.
#pragma once

namespace dlhost {

inline constexpr const char* kLogPattern = "[%H:%M:%S.%e] [%^%l%$] %v";

}  // namespace dlhost
