#pragma once

// Symbol visibility for the public C++ API of torch_ragged.
#if defined(_WIN32)
#if defined(TORCH_RAGGED_BUILDING)
#define TORCH_RAGGED_API __declspec(dllexport)
#else
#define TORCH_RAGGED_API __declspec(dllimport)
#endif
#else
#define TORCH_RAGGED_API __attribute__((visibility("default")))
#endif
