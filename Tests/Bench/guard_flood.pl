# A child's flood of the exec guard, run as the child by the end-to-end test
# (Tests/EndToEndTests/ExecGuardFloodTests.swift) and by `curfew-bench enforcement`:
# perl ... CRAFTED WORKERS DIRECTORY: a session of its own (as a child's desktop
# session is), WORKERS processes exec'ing CRAFTED in a loop, and a new copy of sleep
# (one byte appended: a new identity) run under DIRECTORY every 0.3 s.
use strict; no warnings; use POSIX ();
POSIX::setsid();
my ($crafted, $workers, $dir) = @ARGV;
# execve(2) itself: perl's exec (execvp) hands a file the kernel refuses to sh.
my $execve = (POSIX::uname())[4] eq "aarch64" ? 221 : 59;
for (1..$workers) {
    my $pid = fork();
    if (defined $pid && $pid == 0) { my $path = "$crafted"; while (1) { syscall($execve, $path, 0, 0); } }
}
my $i = 0;
while (1) {
    $i++;
    my $binary = "$dir/tool$i";
    system("/bin/cp", "/bin/sleep", $binary);
    open(my $out, ">>", $binary); print $out "$i"; close($out);
    chmod(0755, $binary);
    my $pid = fork();
    if (defined $pid && $pid == 0) { exec { $binary } ($binary, "0.2"); POSIX::_exit(0); }
    while (waitpid(-1, POSIX::WNOHANG()) > 0) {}
    select(undef, undef, undef, 0.3);
}
