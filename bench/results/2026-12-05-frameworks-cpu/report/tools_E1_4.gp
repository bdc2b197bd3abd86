set encoding utf8
set grid lc rgb '#dddddd'
set key outside right top noenhanced
set title noenhanced
set border lc rgb '#555555'
set title 'resnet50 b16: time per mini-batch (E1)'
set xlabel 'threads'
set ylabel 'ms per mini-batch'
set logscale x 2
set logscale y 10
$s0 << EOD
1 2669.892383
2 1347.767051
EOD
$s1 << EOD
1 3199.462869
2 1753.291712
EOD
$s2 << EOD
1 3136.314173
2 1661.612723
EOD
$s3 << EOD
1 4722.735749
2 2609.789376
EOD
$s4 << EOD
1 4601.115776
2 2586.997674
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_onednn', $s1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_tensorflow', $s2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_mxnet', $s3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch', $s4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch2'
set terminal pngcairo size 1000,560 font 'sans,10' noenhanced
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_4.png'
replot
set terminal svg size 1000,560 font 'sans,10' noenhanced background rgb 'white'
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_4.svg'
replot
unset output
