# The Catch2 tests of a trainer-only build (cmake/trainer_only.cmake, when Catch2 is found): the
# trainer's unit tests that need no coordinator or agent (tests/unit/train without
# lora_e2e_test.cc, class_images_job_test.cc and photo_job_test.cc, which start both) and the
# image tests. The libtorch 2.x leg of CI (infra/torch2.sh) runs them; the full build defines the
# complete binaries in tests/. The reference-fixture cases ([fixture], and the fixture scripts of
# tests/gpu) are registered a second time with the explicit attention kernel
# (GLEANER_ATTENTION=explicit), so libtorch 2.x checks both kernels.
include(Catch)


function(gleaner_trainer_test name)
  target_link_libraries(${name} PRIVATE gleaner_catch_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE
    GLEANER_FIXTURES_DIR="${GLEANER_FIXTURES_DIR}"
    GLEANER_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
    GLEANER_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  catch_discover_tests(${name} TEST_PREFIX "${name}:" EXTRA_ARGS -w NoTests
    PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_dependencies(${name} gleaner-train)
endfunction()

# The tests write real image files (tests/unit/images/writers.cc): they need the codecs and
# libwebpmux; without them (a GPU machine's trainer-only build) there are no test binaries.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND AND TARGET gleaner_train_images)
  pkg_check_modules(TRAINER_TEST_WEBPMUX QUIET IMPORTED_TARGET libwebpmux)
endif()
if(NOT TRAINER_TEST_WEBPMUX_FOUND)
  message(STATUS "trainer-only tests: no image codecs or libwebpmux: no train_tests, images_tests")
  return()
endif()
add_library(gleaner_catch_main STATIC ${PROJECT_SOURCE_DIR}/tests/catch_main.cc)
target_link_libraries(gleaner_catch_main PUBLIC Catch2::Catch2)

if(TARGET gleaner_train_images)
  set(gleaner_test_codecs PkgConfig::IMG_JPEG PkgConfig::IMG_PNG PkgConfig::IMG_WEBP
    PkgConfig::IMG_ZLIB PkgConfig::TRAINER_TEST_WEBPMUX)
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/unit/images/*_test.cc)
  add_executable(images_tests ${srcs} ${PROJECT_SOURCE_DIR}/tests/unit/images/writers.cc)
  target_link_libraries(images_tests PRIVATE gleaner_train_images ${gleaner_test_codecs})
  gleaner_trainer_test(images_tests)
endif()

if(TARGET gleaner_lora_job)
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/unit/train/*_test.cc)
  list(FILTER srcs EXCLUDE REGEX "/(lora_e2e|class_images_job|photo_job)_test\\.cc$")
  # harness.cc: the test harness's files and processes (its HTTP half needs cpp-httplib).
  add_executable(train_tests ${srcs} ${PROJECT_SOURCE_DIR}/tests/unit/images/writers.cc
    ${PROJECT_SOURCE_DIR}/tests/integration/harness.cc)
  target_link_libraries(train_tests PRIVATE gleaner_lora_job gleaner_text_encoder gleaner_vae
    gleaner_sampling gleaner_text_to_image gleaner_train_images ${gleaner_test_codecs})
  gleaner_trainer_test(train_tests)
  add_test(NAME train_tests:fixtures-explicit-attention
    COMMAND train_tests "[fixture]" -w NoTests)
  set_tests_properties(train_tests:fixtures-explicit-attention PROPERTIES TIMEOUT 600
    SKIP_RETURN_CODE 77 ENVIRONMENT GLEANER_ATTENTION=explicit)
endif()
# tests/gpu's fixture checks through `gleaner-train forward`, with the explicit kernel too.
if(TARGET compare_tensors)
  foreach(dtype fp32 bf16)
    add_test(NAME gpu:unet-fixtures-cpu-${dtype}-explicit-attention
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/gpu/check_unet_fixtures.sh
        --bin ${CMAKE_BINARY_DIR}/bin --fixtures ${GLEANER_FIXTURES_DIR} --device cpu --dtype ${dtype})
    set_tests_properties(gpu:unet-fixtures-cpu-${dtype}-explicit-attention PROPERTIES TIMEOUT 300
      SKIP_RETURN_CODE 77 ENVIRONMENT GLEANER_ATTENTION=explicit)
  endforeach()
endif()
