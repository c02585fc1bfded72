# Writes the man page scry.1 from scry's own help texts (cmake -P, run when scry is built):
#   cmake -DSCRY=build/daemon/scry -DOUT=build/dist/scry.1 -DVERSION=0.1.0 -P dist/manpage.cmake
# DESCRIPTION is `scry --help`; one section per command holds `scry help COMMAND` verbatim,
# so the page says exactly what the binary's help says.
foreach(var SCRY OUT VERSION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "manpage.cmake: -D${var}=... is missing")
  endif()
endforeach()

# roff-safe verbatim text: backslashes escaped, lines that start with . or ' kept as text.
function(scry_roff_verbatim text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(scry_help out)
  execute_process(COMMAND "${SCRY}" ${ARGN} OUTPUT_VARIABLE text RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "manpage.cmake: scry ${ARGN} failed (${rc}): ${err}")
  endif()
  scry_roff_verbatim("${text}" text)
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# An ASan build's scry runs here too: its leak check (which needs ptrace) is not the point.
set(ENV{ASAN_OPTIONS} "detect_leaks=0")
scry_help(overview --help)
set(page ".TH SCRY 1 \"\" \"scry ${VERSION}\" \"User Commands\"
.SH NAME
scry \\- see which lines of a Python program spend time and memory, from outside
.SH SYNOPSIS
.nf
${overview}.fi
.SH DESCRIPTION
scry reads a running CPython (3.6 to 3.15) from outside with process_vm_readv and ptrace,
or launches one, and reports which lines spend CPU time (in Python, in native code, or
waiting) and which lines allocate, keep and copy memory. Reading another process needs
root or CAP_SYS_PTRACE.
")
foreach(cmd record dump top diff serve ctl)
  scry_help(text help ${cmd})
  string(APPEND page ".SH \"SCRY ${cmd}\"\n.nf\n${text}.fi\n")
endforeach()
string(APPEND page ".SH FILES
.TP
.I /etc/scry/scry.conf
configuration of scry serve (under the installation prefix when installed elsewhere)
.TP
.I lib/scry/libscry-shim.so
the allocation sampler --memory loads into the target, found beside the installed binary
(PREFIX/bin/../lib/scry/); SCRY_SHIM overrides
.TP
.I lib/systemd/system/scry.service
the systemd unit of scry serve
.SH ENVIRONMENT
.TP
.B SCRY_SHIM
path of libscry-shim.so for --memory
.SH SEE ALSO
The documentation installed with scry (share/doc/scry/: README.md, usage.md, daemon.md,
memory.md, containers.md and the others).
")
file(WRITE "${OUT}" "${page}")
