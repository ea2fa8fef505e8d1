# GLEANER_TRAINER_ONLY=ON: gleaner-train alone, for a GPU machine or a CUDA image. Needs a C++17
# compiler, CMake, libtorch (Debian's, or a PyTorch install's:
# -DTorch_DIR=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')/Torch) and
# nlohmann-json; image codecs are optional (agent/train/CMakeLists.txt). No SQLite, curl, httplib,
# OpenSSL or node. With GLEANER_TESTS: the checks of tests/gpu and bench_train_step, and with
# Catch2 the trainer's unit tests that need no coordinator (tests/trainer_only_tests.cmake).
find_package(Threads REQUIRED)
# Found before any target: a PyTorch wheel may use the pre-C++11 std::string ABI, and every
# library linked into gleaner-train must use the same (TORCH_CXX_FLAGS: -D_GLIBCXX_USE_CXX11_ABI).
find_package(Torch REQUIRED)
separate_arguments(GLEANER_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
add_compile_options(${GLEANER_TORCH_CXX_FLAGS})
# The imported targets are visible in every subdirectory from here.

find_path(GLEANER_JSON_INCLUDE_DIR nlohmann/json.hpp)
if(NOT GLEANER_JSON_INCLUDE_DIR)
  message(FATAL_ERROR "nlohmann/json.hpp not found: install nlohmann-json (Debian/Ubuntu: "
    "nlohmann-json3-dev) or pass -DGLEANER_JSON_INCLUDE_DIR=DIR")
endif()
include_directories(SYSTEM ${GLEANER_JSON_INCLUDE_DIR})

add_subdirectory(shared)
add_subdirectory(shared/native)  # gleaner_files only
add_subdirectory(agent/protocol)
add_subdirectory(agent/train)
if(GLEANER_TESTS)
  enable_testing()
  add_subdirectory(tests/gpu)
  add_subdirectory(tests/bench/train_step)
  # With Catch2 (the libtorch 2.x leg, infra/torch2.sh): the trainer's unit tests too.
  find_package(Catch2 QUIET)
  if(Catch2_FOUND)
    include(tests/trainer_only_tests.cmake)
  endif()
endif()
