// COROLOCK_API marks what a shared libcorolock exports: the public classes
// and functions. The library is compiled with -fvisibility=hidden and
// -fvisibility-inlines-hidden (CMakeLists.txt), so everything else, the
// detail layers and the backends, stays inside it. In a static library the
// mark changes nothing.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define COROLOCK_API __attribute__((visibility("default")))
#else
#define COROLOCK_API
#endif
