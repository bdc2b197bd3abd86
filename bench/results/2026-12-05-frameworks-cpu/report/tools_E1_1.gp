set encoding utf8
set grid lc rgb '#dddddd'
set key outside right top noenhanced
set title noenhanced
set border lc rgb '#555555'
set title 'fcn5 b64: time per mini-batch (E1)'
set xlabel 'threads'
set ylabel 'ms per mini-batch'
set logscale x 2
set logscale y 10
$s0 << EOD
1 408.0291435
2 236.638743
EOD
$s1 << EOD
1 472.486692
2 263.0776185
EOD
$s2 << EOD
1 693.6024745
2 387.0586645
EOD
$s3 << EOD
1 746.3363485
2 491.5419915
EOD
$s4 << EOD
1 721.2334055
2 361.0322995
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_onednn', $s1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_tensorflow', $s2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_mxnet', $s3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch', $s4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch2'
set terminal pngcairo size 1000,560 font 'sans,10' noenhanced
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_1.png'
replot
set terminal svg size 1000,560 font 'sans,10' noenhanced background rgb 'white'
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_1.svg'
replot
unset output
