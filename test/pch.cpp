// The source of corolock_test_pch (test/CMakeLists.txt, COROLOCK_PCH): a
// target whose only job is to make the test programs' precompiled header.
