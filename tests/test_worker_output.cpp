// test_worker_output.cpp — the parent's reading of its case workers' stdout: marker lines, the
// pieces a rank killed mid-write leaves (which once leaked to the user's stderr as
// "@@DLH@@DLHOST_PROGRESS@@ 1 3 0" on SIGTERM of a 2-rank case), and a plugin's own prints.
#include <gtest/gtest.h>

#include "isolate/case_process.h"

namespace dlhost {
namespace {

TEST(worker_output, WholeMarkerLinesAreMarkers) {
  EXPECT_EQ(marker_in("@@DLHOST_PROGRESS@@ 1 3 0"), "@@DLHOST_PROGRESS@@ 1 3 0");
}

TEST(worker_output, AMarkerAfterATornOneIsKept) {
  EXPECT_EQ(marker_in("@@DLH@@DLHOST_PROGRESS@@ 1 3 0"), "@@DLHOST_PROGRESS@@ 1 3 0");
  EXPECT_EQ(marker_in("@@DLHOST_PROG@@DLHOST_RECORD@@ {}"), "@@DLHOST_RECORD@@ {}");
}

TEST(worker_output, ATornMarkerAloneIsDropped) {
  EXPECT_EQ(marker_in("@@DLH"), "");
  EXPECT_EQ(marker_in("loss 2.3 @@DL"), "");
}

TEST(worker_output, APluginsOwnPrintIsNotAMarker) {
  EXPECT_EQ(marker_in("cudnn: using algorithm 3"), std::nullopt);
  EXPECT_EQ(marker_in("a@@b"), std::nullopt);
  EXPECT_EQ(marker_in(""), std::nullopt);
}

}  // namespace
}  // namespace dlhost
