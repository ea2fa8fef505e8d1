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

# GLEANER_TORCH_PCH=ON: <torch/torch.h> precompiled once per libtorch target instead of parsed by
# every source (most of a trainer source's compile time). Used by the builds that start from
# nothing: the libtorch 2.x leg (infra/torch2.sh) and tests/gpu/compile_cuda.sh.
option(GLEANER_TORCH_PCH "Precompile <torch/torch.h> for the trainer's libtorch targets" OFF)
if(GLEANER_TORCH_PCH)
  foreach(t gleaner_train_nn gleaner_unet gleaner_flux gleaner_training gleaner_lora_job
            gleaner_sampling gleaner_text_to_image gleaner_vae gleaner_text_encoder gleaner_diffusers_model gleaner_train_commands train_tests)
    if(TARGET ${t})
      target_precompile_headers(${t} PRIVATE <torch/torch.h>)
    endif()
  endforeach()
  # Catch2 first, without libtorch (its CHECK and glog's), or no libtorch at all.
  set_source_files_properties(${PROJECT_SOURCE_DIR}/tests/unit/train/clip_tokenizer_test.cc
    ${PROJECT_SOURCE_DIR}/tests/unit/images/writers.cc PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endif()
