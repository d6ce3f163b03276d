# Shell helpers the bench scripts share: the CPU's name, the median of timings, a timed run.
# Source it: `. "$(dirname "$0")/../common.sh"`.

# The CPU model, as figures are to be reported with it ("AMD EPYC 7B13", "Intel(R) Xeon(R) ...").
cpu_model() { grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'; }

# The median of the numbers on stdin (separated by spaces or newlines): alternating rounds on a
# shared machine move single runs by 20%, their median far less.
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# seconds_since T0: the seconds from T0 (a `date +%s.%N`) to now, three decimals, one line.
seconds_since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", t1 - t0 }'; }
