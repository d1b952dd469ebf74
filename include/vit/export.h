/* VIT_API marks the public API of the installed library (include/vit/classifier.h,
 * include/vitcpp.h, vit::Error, vit::version()). A shared libvitcpp is compiled with hidden
 * visibility, so these are the only symbols it exports; in the static library the mark
 * changes nothing. C comments: vitcpp.h includes this file, and C90 compilers read it.
 *
 * On Windows (MSVC, MinGW) the same mark is __declspec: dllexport while the library itself is
 * compiled (VIT_BUILDING_LIBRARY), dllimport for its users, nothing with VIT_STATIC (a static
 * libvitcpp, where there is nothing to import). */
#pragma once

#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(VIT_STATIC)
#define VIT_API
#elif defined(VIT_BUILDING_LIBRARY)
#define VIT_API __declspec(dllexport)
#else
#define VIT_API __declspec(dllimport)
#endif
#else
#define VIT_API __attribute__((visibility("default")))
#endif
