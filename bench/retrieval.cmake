# Retrieval micro-benchmarks; include()d from bench/CMakeLists.txt.
add_executable(retrieval_bench ${CMAKE_CURRENT_LIST_DIR}/retrieval_bench.cc)
target_link_libraries(retrieval_bench PRIVATE graft_retrieval benchmark::benchmark)
