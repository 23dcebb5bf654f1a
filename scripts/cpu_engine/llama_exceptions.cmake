# Read by llama.cpp's CMake project (CMAKE_PROJECT_INCLUDE, from scripts/cpu_engine/llama_lib.sh):
# catchable C++ exceptions for every library but ggml-cpu. Emscripten's exceptions are emulated
# in JS, which slows each call that may throw, and ggml-cpu's kernels are C++ that never throws:
# built with them, decoding ran at half speed.
include_guard(GLOBAL)

function(agent_llama_enable_exceptions)
  foreach(target llama ggml ggml-base)
    target_compile_options(${target} PRIVATE -fexceptions)
  endforeach()
endfunction()

# The targets exist only once the whole project has been read.
cmake_language(DEFER CALL agent_llama_enable_exceptions)
