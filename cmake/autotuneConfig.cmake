# CMake package config for autotune: find_package(autotune) then link autotune::autotune.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/autotuneTargets.cmake")
