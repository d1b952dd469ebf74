// VIT_API marks the public API of the installed library (include/vit/classifier.h,
// include/vitcpp.h, vit::Error, vit::version()). A shared libvitcpp is compiled with hidden
// visibility, so these are the only symbols it exports; in the static library the mark
// changes nothing.
#pragma once

#define VIT_API __attribute__((visibility("default")))
