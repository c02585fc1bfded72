# ScryTests.cmake - how a functional suite registers its ctest cases, included by the
# top-level CMakeLists.txt after ScryInterpreters.cmake. A case runs a suite's driver with
# the test python3 against the built scry and holds the machine-wide lock scry_func (the
# functional checks are timing-sensitive and must not run concurrently with each other); a
# driver that prints "SKIP <what>: reason" is reported as skipped.

# scry_func_test(NAME SCRIPT S TIMEOUT T LABEL L [PYTHON V] [SKIP W] [ARGS A...]): one case
# NAME that runs `python3 S --scry <scry> [--python V] A...` with a timeout of T seconds and
# label L. It is skipped on a line "SKIP W: "; W is a regular expression, by default V with
# its dots escaped, or NAME without PYTHON.
function(scry_func_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SCRIPT;TIMEOUT;LABEL;PYTHON;SKIP" "ARGS")
  set(python)
  set(skip ${name})
  if(DEFINED arg_PYTHON)
    set(python --python ${arg_PYTHON})
    string(REPLACE "." "\\." skip "${arg_PYTHON}")
  endif()
  if(DEFINED arg_SKIP)
    set(skip "${arg_SKIP}")
  endif()
  add_test(NAME ${name}
           COMMAND ${SCRY_TEST_PYTHON3} ${arg_SCRIPT} --scry $<TARGET_FILE:scry> ${python}
                   ${arg_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${arg_TIMEOUT} LABELS ${arg_LABEL}
                       RESOURCE_LOCK scry_func SKIP_REGULAR_EXPRESSION "(^|\n)SKIP ${skip}: ")
endfunction()

# scry_func_suite(PREFIX SCRIPT S TIMEOUT T VERSIONS V... [SUFFIX X] [LABEL L] [ARGS A...]
#                 [FLAG F UNLESS_IN U...]): scry_func_test PREFIX.V[X] with PYTHON V for each
# interpreter V (label L, by default PREFIX); the argument F follows A on the versions not
# in U (a --smoke run outside a suite's full set).
function(scry_func_suite prefix)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SCRIPT;TIMEOUT;SUFFIX;LABEL;FLAG"
                        "VERSIONS;ARGS;UNLESS_IN")
  set(label ${prefix})
  if(DEFINED arg_LABEL)
    set(label ${arg_LABEL})
  endif()
  foreach(v ${arg_VERSIONS})
    set(flag)
    if(DEFINED arg_FLAG AND NOT v IN_LIST arg_UNLESS_IN)
      set(flag ${arg_FLAG})
    endif()
    scry_func_test(${prefix}.${v}${arg_SUFFIX} SCRIPT ${arg_SCRIPT} TIMEOUT ${arg_TIMEOUT}
                   LABEL ${label} PYTHON ${v} ARGS ${arg_ARGS} ${flag})
  endforeach()
endfunction()
