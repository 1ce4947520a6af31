#!/usr/bin/perl
# Writes a docsync status file byte by byte (layout: shared/docsync_status.h, layout version 4) for
# the status regress tests: fresh, stale, corrupt, foreign-version and half-written files that a
# running worker would not produce on demand. An independent encoding of the layout, so the
# extension's reader is checked against bytes the worker's code did not write.
#   status_fixture.pl --dir D --database DB --slot S [--state streaming] [--pid 4242]
#       [--heartbeat-age SECONDS] [--error TEXT] [--error-age SECONDS]
#       [--query NAME:RECOMPUTES:FAILURES:COMPUTE_US[:ERROR]]... [--set-aside NAME=WHY]...
#       [--received N] [--acked N]
#       [--live N] [--dirty N] [--recompute REASON:DONE:TOTAL:SECONDS_AGO[:FINISHED_SECONDS_AGO]]
#       [--audit SAMPLES:DIVERGENCES] [--gap] [--sink-unchecked]
#       [--corrupt] [--layout-version N] [--odd-seq] [--truncate BYTES] [--garbage]
use strict;
use warnings;
use Getopt::Long;
use Time::HiRes qw(time);

# A live file's heartbeat is set ten minutes ahead, so it still looks alive however slowly a loaded
# machine runs the test (the view calls a heartbeat stale after 5 s).
my %o = (state => 'streaming', pid => 4242, 'heartbeat-age' => -600, 'error-age' => 0, received => 0,
         acked => 0, live => 0, dirty => 0, 'layout-version' => 4, audit => '0:0', query => [],
         'set-aside' => {});
GetOptions(\%o, 'dir=s', 'database=s', 'slot=s', 'state=s', 'pid=i', 'heartbeat-age=f', 'error=s',
           'error-age=f', 'query=s@', 'received=i', 'acked=i', 'live=i', 'dirty=i', 'corrupt',
           'layout-version=i', 'odd-seq', 'truncate=i', 'garbage', 'recompute=s', 'audit=s', 'gap',
           'sink-unchecked', 'set-aside=s%')
  or die "status_fixture: bad arguments\n";
for (qw(dir database slot)) { defined $o{$_} or die "status_fixture: --$_ is required\n" }

my %states = (starting => 1, streaming => 2, reconnecting => 3, draining => 4, 'valve-reset' => 5, stopped => 6, connecting => 7);
my $state = $states{$o{state}} // die "status_fixture: unknown state $o{state}\n";
my $now = int(time() * 1e6);
my $hb = $now - int($o{'heartbeat-age'} * 1e6);
my $err_us = defined $o{error} ? $now - int($o{'error-age'} * 1e6) : 0;

# The recompute of every live doc: reason (startup 1, valve 2), done, total, start and end times;
# --gap: it covers a gap in the stream (DOCSYNC_STATUS_RECOMPUTE_GAP). --sink-unchecked: the sink's
# connection broke and was not checked since (DOCSYNC_STATUS_SINK_UNCHECKED, with or without a recompute).
my ($rc_reason, $rc_done, $rc_total, $rc_started, $rc_finished) = (0, 0, 0, 0, 0);
my $rc_flags = ($o{gap} ? 1 : 0) | ($o{'sink-unchecked'} ? 2 : 0);
if (defined $o{recompute}) {
  my ($reason, $done, $total, $ago, $finished_ago) = split /:/, $o{recompute};
  my %reasons = (startup => 1, valve => 2);
  $rc_reason = $reasons{$reason} // die "status_fixture: unknown recompute reason $reason\n";
  ($rc_done, $rc_total) = ($done, $total);
  $rc_started = $now - int($ago * 1e6);
  $rc_finished = defined $finished_ago ? $now - int($finished_ago * 1e6) : 0;
}

# The continuous audit's totals.
my ($audit_samples, $audit_divergences) = split /:/, $o{audit};

sub field { my ($s, $n) = @_; die "status_fixture: '$s' too long\n" if length($s) >= $n; pack("a$n", $s) }

my $body = pack('q q l L', $hb, $hb - 60_000_000, $o{pid}, $state)
  . field($o{database}, 64) . field($o{slot}, 64)
  . pack('Q Q Q q Q Q Q Q Q Q Q Q Q Q', 1, $o{received}, $o{acked}, $o{acked} ? $hb : 0, 0, $o{dirty}, 0,
         $o{live}, 100, 90, 89, 1, 0, 0)
  . pack('Q Q Q L L Q Q q q', 3, $audit_samples, $audit_divergences, $rc_reason, $rc_flags, $rc_total, $rc_done,
         $rc_started, $rc_finished)
  . pack('q', $err_us) . field($o{error} // '', 256);
my @queries = @{$o{query}};
$body .= pack('L L', scalar(@queries), 0);
for my $i (0 .. 63) {
  if ($i < @queries) {
    my ($name, $rec, $fail, $us, $qerr) = split /:/, $queries[$i], 5;
    $body .= field($name, 64) . pack('Q Q Q q', $rec, $fail, $us, defined $qerr ? $now : 0) . field($qerr // '', 256)
      . field($o{'set-aside'}{$name} // '', 256);
  } else {
    $body .= "\0" x 608;
  }
}
length($body) == 39512 or die "status_fixture: body is " . length($body) . " bytes, layout says 39512\n";

# CRC-32C (Castagnoli), table-driven.
my @table;
for my $n (0 .. 255) {
  my $c = $n;
  $c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) for 1 .. 8;
  $table[$n] = $c;
}
my $crc = 0xFFFFFFFF;
$crc = $table[($crc ^ $_) & 0xFF] ^ ($crc >> 8) for unpack('C*', $body);
$crc ^= 0xFFFFFFFF;

$body = pack('q', $hb + 1) . substr($body, 8) if $o{corrupt};  # heartbeat changed after the CRC
my $seq = $o{'odd-seq'} ? 7 : 6;
my $file = pack('L L L L Q', 0x54534443, $o{'layout-version'}, 24 + length($body), $crc, $seq) . $body;
$file = 'this is not a docsync status file' . ("\0" x 100) if $o{garbage};
$file = substr($file, 0, $o{truncate}) if defined $o{truncate};

my $path = "$o{dir}/$o{database}.$o{slot}.status";
open(my $fh, '>:raw', "$path.tmp") or die "status_fixture: cannot write $path.tmp: $!\n";
print $fh $file;
close($fh) or die "status_fixture: cannot write $path.tmp: $!\n";
chmod 0644, "$path.tmp";
rename("$path.tmp", $path) or die "status_fixture: cannot rename to $path: $!\n";
