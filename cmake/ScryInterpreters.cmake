# ScryInterpreters.cmake - the interpreters the test suites run against: the ONE list
# (tests/lib/scrytest knows where each lives), included by the top-level CMakeLists.txt
# before any directory registers tests. Every suite (tests/**, shim/) takes its versions from
# these lists or a named subset of them;
# scry_interpreters() refuses a version outside SCRY_PY_ALL, so a typo cannot register a case
# that always skips.
set(SCRY_PY_PYENV 3.6 3.7 3.8 3.9 3.10 3.11 3.12 3.13) # ~/.pyenv/versions/V
set(SCRY_PY_DEBIAN debian3.11)  # /usr/bin/python3.11: static, stripped, with numpy
set(SCRY_PY_LEGACY 2.7)         # pyenv's 2.7: only the func suite
set(SCRY_PY_SID 3.14 3.15)      # the cached Debian sid root (scripts/sid-root.sh), chroot
set(SCRY_PY_SID_DBG 3.14d 3.15d) # the same root's Py_DEBUG builds
set(SCRY_PY_ALL ${SCRY_PY_PYENV} ${SCRY_PY_DEBIAN} ${SCRY_PY_LEGACY} ${SCRY_PY_SID}
                ${SCRY_PY_SID_DBG})
set(SCRY_PY_PY3 ${SCRY_PY_ALL})
list(REMOVE_ITEM SCRY_PY_PY3 ${SCRY_PY_LEGACY})
set(SCRY_PY_SID_ALL ${SCRY_PY_SID} ${SCRY_PY_SID_DBG})

# scry_interpreters(NAME V...): sets NAME to the versions V, each checked against SCRY_PY_ALL.
function(scry_interpreters name)
  foreach(v ${ARGN})
    if(NOT v IN_LIST SCRY_PY_ALL)
      message(FATAL_ERROR "${name}: ${v} is not one of SCRY_PY_ALL (cmake/ScryInterpreters.cmake)")
    endif()
  endforeach()
  set(${name} ${ARGN} PARENT_SCOPE)
endfunction()

# The per-suite subsets (each suite's CMakeLists.txt says why these):
scry_interpreters(SCRY_PY_SHIM 3.8 3.10 3.11 debian3.11 3.12 3.13) # func.shim, one case
scry_interpreters(SCRY_PY_FUNC_COMMON 3.8 3.12 3.14 debian3.11 2.7) # func: the common tests
scry_interpreters(SCRY_PY_ATTR_FULL 3.8 3.12 debian3.11 3.14 3.15d)
scry_interpreters(SCRY_PY_ATTR_PTRACE 3.8 3.12 debian3.11)
scry_interpreters(SCRY_PY_LINES_FULL 3.8 3.11 3.12 3.13 debian3.11 3.14 3.15d)
scry_interpreters(SCRY_PY_FAULTS 3.12 debian3.11 3.8 3.13)
scry_interpreters(SCRY_PY_FAULTS_LONG 3.12 debian3.11) # 26 cycles, the others 14
scry_interpreters(SCRY_PY_POSTMORTEM 3.12 3.6 3.8 3.13 debian3.11 3.14 3.15d)
scry_interpreters(SCRY_PY_WHOLE_FUNCTION 3.6 3.10 3.12 3.13 3.14 3.15d)
scry_interpreters(SCRY_PY_WHOLE_SUBPROCESSES 3.12 3.14)
scry_interpreters(SCRY_PY_BPF 3.8 3.10 3.12 3.14)
scry_interpreters(SCRY_PY_MEMORY 3.8 3.11 3.12 debian3.11)
scry_interpreters(SCRY_PY_MEMSAFE 3.12 debian3.11)

# The python3 that runs every suite's driver (the system one first: a pyenv shim on PATH
# would work but adds a bash hop).
find_program(SCRY_TEST_PYTHON3 NAMES python3 HINTS /usr/bin /usr/local/bin)
