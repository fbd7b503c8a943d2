# Finds pcg-cpp (header-only; Debian's libpcg-cpp-dev ships no CMake package) and wraps it in
# the imported target pcg-cpp::pcg-cpp.
#
#   find_package(pcg-cpp REQUIRED)
#   target_link_libraries(app PRIVATE pcg-cpp::pcg-cpp)
#
# Sets pcg-cpp_FOUND and pcg-cpp_INCLUDE_DIR; set pcg-cpp_INCLUDE_DIR to point at another copy.
find_path(pcg-cpp_INCLUDE_DIR NAMES pcg_random.hpp PATH_SUFFIXES pcg-cpp pcg)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(pcg-cpp REQUIRED_VARS pcg-cpp_INCLUDE_DIR)
mark_as_advanced(pcg-cpp_INCLUDE_DIR)

if(pcg-cpp_FOUND AND NOT TARGET pcg-cpp::pcg-cpp)
  add_library(pcg-cpp::pcg-cpp INTERFACE IMPORTED)
  set_target_properties(pcg-cpp::pcg-cpp PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${pcg-cpp_INCLUDE_DIR}")
endif()
