// VIT_API on Windows (include/vit/export.h): dllimport for the library's users. Checked by
// including the header as a Windows compiler sees it (_WIN32 defined), before anything else.
#define _WIN32 1
#include "vit/export.h"
#define VIT_STR2(x) #x
#define VIT_STR(x) VIT_STR2(x)
static const char* const kUsersMark = VIT_STR(VIT_API);
#undef _WIN32

#include <gtest/gtest.h>

#include <string>

TEST(ExportMacro, IsDllimportForUsersOnWindows) {
  EXPECT_EQ(std::string(kUsersMark), "__declspec(dllimport)");
}
