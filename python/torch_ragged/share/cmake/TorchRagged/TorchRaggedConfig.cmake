# find_package(TorchRagged) from the installed Python package (pip install torch_ragged): the target
# TorchRagged::TorchRagged is the package's op library (torch_ragged/_C*.so, which needs no Python)
# with the public headers (torch_ragged/include). Point CMake at it, and at torch, with
#   -DCMAKE_PREFIX_PATH="$(python -c 'import torch, torch_ragged; print(torch_ragged.cmake_prefix_path() + ";" + torch.utils.cmake_prefix_path)')"
# The package was built against one torch: use that torch's CMake package.
get_filename_component(_torch_ragged_package "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

include(CMakeFindDependencyMacro)
find_dependency(Torch)

file(GLOB _torch_ragged_library "${_torch_ragged_package}/_C*.so")
if(NOT _torch_ragged_library OR NOT EXISTS "${_torch_ragged_package}/include/torch_ragged/torch_ragged.h")
  set(TorchRagged_FOUND FALSE)
  set(TorchRagged_NOT_FOUND_MESSAGE
      "the torch_ragged package at ${_torch_ragged_package} has no built op library or headers (build it first)")
  return()
endif()
list(GET _torch_ragged_library 0 _torch_ragged_library)

if(NOT TARGET TorchRagged::TorchRagged)
  add_library(TorchRagged::TorchRagged SHARED IMPORTED)
  set_target_properties(TorchRagged::TorchRagged PROPERTIES
    IMPORTED_LOCATION "${_torch_ragged_library}"
    INTERFACE_INCLUDE_DIRECTORIES "${_torch_ragged_package}/include"
    INTERFACE_LINK_LIBRARIES "${TORCH_LIBRARIES}"
    # A program that reaches the ops only through TorchScript or an AOTInductor package references no
    # symbol of the library; without --no-as-needed the linker would drop it and the ops would never
    # register. pip's torch finds NCCL & co. through its own RUNPATH at run time; the link-time check of
    # libtorch_cuda.so's dependencies cannot, so shared libraries' symbols are left to the loader.
    INTERFACE_LINK_OPTIONS "LINKER:--no-as-needed;LINKER:--allow-shlib-undefined")
endif()
set(TorchRagged_FOUND TRUE)
