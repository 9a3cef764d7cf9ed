# programs.cmake - the programs of both CMake consumers: C11, C++11 and
# C++17, each linked with sluice::sluice (shared) and with
# sluice::sluice_static, as c-shared, c++11-static, ...
set(lib_shared sluice::sluice)
set(lib_static sluice::sluice_static)
foreach(kind shared static)
  add_executable(c-${kind} ${SRC}/consumer.c)
  set_target_properties(c-${kind} PROPERTIES C_STANDARD 11
    C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  set(programs c-${kind})
  foreach(std 11 17)
    add_executable(c++${std}-${kind} ${SRC}/consumer.cpp)
    set_target_properties(c++${std}-${kind} PROPERTIES CXX_STANDARD ${std}
      CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
    list(APPEND programs c++${std}-${kind})
  endforeach()
  foreach(p ${programs})
    target_compile_options(${p} PRIVATE -Wall -Wextra -Wpedantic -Werror)
    target_link_libraries(${p} PRIVATE ${lib_${kind}})
  endforeach()
endforeach()
