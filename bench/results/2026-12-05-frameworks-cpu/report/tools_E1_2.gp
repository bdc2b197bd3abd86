set encoding utf8
set grid lc rgb '#dddddd'
set key outside right top noenhanced
set title noenhanced
set border lc rgb '#555555'
set title 'fcn8 b64: time per mini-batch (E1)'
set xlabel 'threads'
set ylabel 'ms per mini-batch'
set logscale x 2
set logscale y 10
$s0 << EOD
1 445.1625825
2 237.886184
EOD
$s1 << EOD
1 529.173561
2 284.4731935
EOD
$s2 << EOD
1 772.732267
2 396.6380925
EOD
$s3 << EOD
1 812.837847
2 510.9897315
EOD
$s4 << EOD
1 752.9455355
2 384.103633
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_onednn', $s1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_tensorflow', $s2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_mxnet', $s3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch', $s4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch2'
set terminal pngcairo size 1000,560 font 'sans,10' noenhanced
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_2.png'
replot
set terminal svg size 1000,560 font 'sans,10' noenhanced background rgb 'white'
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_2.svg'
replot
unset output
