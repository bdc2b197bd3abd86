set encoding utf8
set grid lc rgb '#dddddd'
set key outside right top noenhanced
set title noenhanced
set border lc rgb '#555555'
set title 'autoencoder b100: time per mini-batch (E1)'
set xlabel 'threads'
set ylabel 'ms per mini-batch'
set logscale x 2
set logscale y 10
$s0 << EOD
1 14.002118
2 7.6388445
EOD
$s1 << EOD
1 15.701835
2 11.1386695
EOD
$s2 << EOD
1 18.064011
2 15.3922385
EOD
$s3 << EOD
1 20.818816
2 24.4273055
EOD
$s4 << EOD
1 17.022999
2 9.358764
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_onednn', $s1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_tensorflow', $s2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_mxnet', $s3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch', $s4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'cpu_libtorch2'
set terminal pngcairo size 1000,560 font 'sans,10' noenhanced
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_12.png'
replot
set terminal svg size 1000,560 font 'sans,10' noenhanced background rgb 'white'
set output 'bench/results/2026-12-05-frameworks-cpu/report/tools_E1_12.svg'
replot
unset output
