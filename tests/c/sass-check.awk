# sass-check.awk: checks the SASS (cuobjdump -sass) of the kernels of cuda_sass.cu, one device
# method each, for what the trigger protocol needs of the GPU's memory model:
#   - every poll is a volatile system-scope load (LD/LDG ... .STRONG.SYS) inside its loop: each
#     loop (a backward branch) holds a load, every global load in a loop is .STRONG.SYS unless
#     it only fetches the address a .STRONG.SYS load of the loop reads (a field of the
#     connection, reloaded each turn), and the kernel has as many such poll loops as its method
#     spins (sass_<name>_<polls>);
#   - a system-scope fence (MEMBAR ... SYS) follows each poll loop before the next store (an
#     acquire: nothing the kernel does after a poll moves before it);
#   - the trigger is one 128-bit volatile store (ST/STG .E.128 .STRONG.SYS), with a system-scope
#     fence after the last poll before it and no store between (a release);
#   - a kernel that pushes (sass_push*, sass_flush*, sass_put*, sass_signal*) has a trigger store.
# The shared-memory compare-and-swap loop nvcc emits for atomicAdd on a generic pointer (LDS and
# ATOMS only) is not a poll. A heuristic over the linear code: it reads the code as laid out,
# which is how nvcc 11.8 lays out these kernels for sm_80 and sm_90. Prints one line per kernel,
# "sass: ok NAME ..." or "sass: FAIL NAME: why"; exits 1 when any kernel fails or none was seen.
function hex(s,    i, c, v) {
  sub(/^0x/, "", s)
  v = 0
  for (i = 1; i <= length(s); i++) {
    c = index("0123456789abcdef", tolower(substr(s, i, 1)))
    if (c == 0) return -1
    v = v * 16 + c - 1
  }
  return v
}
function isLoad(op) { return op ~ /^LDG?\./ || op == "LD" || op == "LDG" }
function isStore(op) { return op ~ /^(STG?|ATOMG?|RED)(\.|$)/ }
function isSysFence(op, text) { return op ~ /^MEMBAR/ && text ~ /SYS/ }
function check(    i, j, k, a, b, bad, loops, polls, want, hasLoad, hasShared, sawFence, trig, why) {
  if (fn == "") return
  nfn++
  bad = ""
  loops = 0
  polls = 0
  want = fn
  sub(/^.*_/, "", want)
  want = want + 0
  for (i = 1; i <= n; i++) {
    if (op[i] !~ /^BRA/ || target[i] < 0 || target[i] > addr[i]) continue
    # a loop: [a, i]
    for (a = 1; a <= n && addr[a] < target[i]; a++) ;
    if (target[i] == addr[i] && i == last) continue # the trap after the kernel's EXIT
    hasLoad = 0
    hasShared = 0
    delete base
    for (j = a; j <= i; j++) {
      if (op[j] ~ /^(LDS|ATOMS)/) hasShared = 1
      if (isLoad(op[j]) && text[j] ~ /\.STRONG\.SYS/ && match(text[j], /\[R[0-9]+/)) base[substr(text[j], RSTART + 1, RLENGTH - 1)] = 1
    }
    for (j = a; j <= i; j++) {
      if (!isLoad(op[j])) continue
      hasLoad = 1
      # a plain load in a loop only fetches the address a poll reads (a field of the connection)
      if (text[j] !~ /\.STRONG\.SYS/ && !(dst[j] in base))
        bad = bad sprintf("; a load in the loop at %s is not .STRONG.SYS: %s", hx[a], text[j])
    }
    if (!hasLoad && hasShared) continue
    if (!hasLoad) {
      bad = bad sprintf("; the loop at %s polls nothing (its load was hoisted out)", hx[a])
      continue
    }
    polls++
    # the acquire: a system fence after the loop before any store
    sawFence = 0
    for (k = i + 1; k <= n; k++) {
      if (isSysFence(op[k], text[k])) { sawFence = 1; break }
      if (op[k] ~ /^EXIT/) { sawFence = 1; break }
      if (isStore(op[k])) break
    }
    if (!sawFence) bad = bad sprintf("; no system-scope fence after the poll loop at %s before the store at %s", hx[a], hx[k])
  }
  if (polls < want) bad = bad sprintf("; %d poll loop(s), want %d", polls, want)
  trig = 0
  for (i = 1; i <= n; i++) {
    if (op[i] !~ /^STG?\.E\.128/) continue
    trig++
    if (text[i] !~ /\.STRONG\.SYS/) bad = bad sprintf("; the trigger store at %s is not volatile (.STRONG.SYS)", hx[i])
    why = "the start of the kernel"
    for (k = i - 1; k >= 1; k--) {
      if (isSysFence(op[k], text[k])) { why = ""; break }
      if (isStore(op[k])) { why = "the store at " hx[k]; break }
      if (isLoad(op[k]) && text[k] ~ /\.STRONG\.SYS/) { why = "the poll at " hx[k]; break }
    }
    if (why != "") bad = bad sprintf("; no system-scope fence between %s and the trigger store at %s", why, hx[i])
  }
  if (fn ~ /^sass_(push|flush|put|signal)/ && trig == 0) bad = bad "; no 128-bit trigger store"
  if (bad == "") {
    printf "sass: ok   %s (%s): %d poll loop(s), each .STRONG.SYS then a system fence; %d trigger store(s), each one 128-bit volatile store after a system fence\n", fn, arch, polls, trig
  } else {
    printf "sass: FAIL %s (%s)%s\n", fn, arch, bad
    nbad++
  }
}
/code for sm_/ { arch = $3 }
/Function : / {
  check()
  fn = $3
  n = 0
  last = 0
  next
}
/^[ \t]*\/\*[0-9a-f]+\*\// {
  line = $0
  sub(/\/\* 0x[0-9a-f]+ \*\/.*$/, "", line) # the encoding column, where present
  match(line, /\/\*[0-9a-f]+\*\//)
  n++
  hx[n] = "0x" substr(line, RSTART + 2, RLENGTH - 4)
  addr[n] = hex(hx[n])
  rest = substr(line, RSTART + RLENGTH)
  sub(/^[ \t]+/, "", rest)
  sub(/[ \t]*;?[ \t]*$/, "", rest)
  text[n] = rest
  if (rest ~ /^@!?U?P[0-9T]+[ \t]/) sub(/^@!?U?P[0-9T]+[ \t]+/, "", rest)
  split(rest, w, /[ \t]+/)
  op[n] = w[1]
  dst[n] = w[2]
  sub(/,$/, "", dst[n])
  if (op[n] != "NOP") last = n
  target[n] = -1
  if (op[n] ~ /^BRA/ && match(rest, /0x[0-9a-f]+/)) target[n] = hex(substr(rest, RSTART, RLENGTH))
}
END {
  check()
  if (nfn == 0) {
    print "sass: FAIL no kernel in the disassembly"
    exit 1
  }
  exit nbad > 0
}
