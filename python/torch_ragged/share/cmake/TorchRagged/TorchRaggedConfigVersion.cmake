# find_package(TorchRagged <version>) against the installed Python package: the version is the package's own
# (torch_ragged/_version.py, the one place it is written); a request is met by the same major version, this
# version or newer (CMake's SameMajorVersion rule, as the CMake install's version file).
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../../../_version.py" _torch_ragged_version_line REGEX "__version__ = ")
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" PACKAGE_VERSION "${_torch_ragged_version_line}")
string(REGEX MATCH "^[0-9]+" _torch_ragged_major "${PACKAGE_VERSION}")

set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(PACKAGE_VERSION AND PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION
   AND PACKAGE_FIND_VERSION_MAJOR STREQUAL _torch_ragged_major)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
