# ScryHeaders.cmake - what a module's users may include.
#
# scry_public_headers(TARGET H...): the headers H of the calling directory are TARGET's
# contract: they are linked (symbolic links, so an error points at the real file once
# followed) into ${CMAKE_BINARY_DIR}/include/TARGET, the one include directory TARGET
# exports (PUBLIC). The source directory, with every other header, stays PRIVATE to
# TARGET. A public header may include only public headers (its own module's or another's).
# Unit tests and fuzz targets are white-box: each is given the source directory of the
# module it tests (tests/CMakeLists.txt, tests/fuzz/CMakeLists.txt).
function(scry_public_headers target)
  set(dir ${CMAKE_BINARY_DIR}/include/${target})
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  foreach(h ${ARGN})
    if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${h})
      message(FATAL_ERROR "scry_public_headers(${target}): no ${CMAKE_CURRENT_SOURCE_DIR}/${h}")
    endif()
    file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${h} ${dir}/${h} SYMBOLIC)
  endforeach()
  # The private directory first: the module's own files find its headers where they are.
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_include_directories(${target} PUBLIC ${dir})
endfunction()

