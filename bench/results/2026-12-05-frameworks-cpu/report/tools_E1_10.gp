set encoding utf8
set grid lc rgb '#dddddd'
set key outside right top noenhanced
set title noenhanced
set border lc rgb '#555555'
set title 'lstm_ptb b128: time per mini-batch (E1)'
set xlabel 'threads'
set ylabel 'ms per mini-batch'
set logscale x 2
set logscale y 10
$s0 << EOD
1 698.2226175
2 338.5485365
EOD
$s1 << EOD
1 971.0515635
2 547.0102055
EOD
$s2 << EOD
1 816.010904
2 456.627974
EOD
$s3 << EOD
1 1098.396548
2 1165.091366
EOD
$s4 << EOD
1 935.7118645
2 527.8124185
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_onednn', $s1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_tensorflow', $s2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_mxnet', $s3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch', $s4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch2'
set terminal pngcairo size 1000,560 font 'sans,10' noenhanced
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_10.png'
replot
set terminal svg size 1000,560 font 'sans,10' noenhanced background rgb 'white'
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_10.svg'
replot
unset output
