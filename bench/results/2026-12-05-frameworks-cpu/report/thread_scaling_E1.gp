set encoding utf8
set grid lc rgb '#dddddd'
set key outside right top noenhanced
set title noenhanced
set border lc rgb '#555555'
set title 'CPU thread scaling (E1)'
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
$s5 << EOD
1 445.1625825
2 237.886184
EOD
$s6 << EOD
1 529.173561
2 284.4731935
EOD
$s7 << EOD
1 772.732267
2 396.6380925
EOD
$s8 << EOD
1 812.837847
2 510.9897315
EOD
$s9 << EOD
1 752.9455355
2 384.103633
EOD
$s10 << EOD
1 618.9289095
2 337.7183995
EOD
$s11 << EOD
1 731.063133
2 408.577354
EOD
$s12 << EOD
1 861.3960905
2 452.736453
EOD
$s13 << EOD
1 987.0272275
2 756.7504435
EOD
$s14 << EOD
1 885.5920865
2 457.0158465
EOD
$s15 << EOD
1 2669.892383
2 1347.767051
EOD
$s16 << EOD
1 3199.462869
2 1753.291712
EOD
$s17 << EOD
1 3136.314173
2 1661.612723
EOD
$s18 << EOD
1 4722.735749
2 2609.789376
EOD
$s19 << EOD
1 4601.115776
2 2586.997674
EOD
$s20 << EOD
1 768.98529
2 357.8412775
EOD
$s21 << EOD
1 954.806855
2 686.292966
EOD
$s22 << EOD
1 808.468519
2 844.6911905
EOD
$s23 << EOD
1 1133.64376
2 1341.524436
EOD
$s24 << EOD
1 878.058988
2 511.0397635
EOD
$s25 << EOD
1 1346.443732
2 694.946897
EOD
$s26 << EOD
1 1938.651238
2 2016.259683
EOD
$s27 << EOD
1 1568.322729
2 914.795648
EOD
$s28 << EOD
1 2234.81606
2 2297.528842
EOD
$s29 << EOD
1 1787.759343
2 1034.516073
EOD
$s30 << EOD
1 513.375852
2 250.503541
EOD
$s31 << EOD
1 487.492218
2 250.806151
EOD
$s32 << EOD
1 512.182346
2 272.0405015
EOD
$s33 << EOD
1 591.146713
2 343.0480265
EOD
$s34 << EOD
1 514.666198
2 266.513535
EOD
$s35 << EOD
1 433.0180375
2 212.74255
EOD
$s36 << EOD
1 561.075897
2 299.9248845
EOD
$s37 << EOD
1 574.2095525
2 296.8033085
EOD
$s38 << EOD
1 1108.620768
2 604.9232285
EOD
$s39 << EOD
1 1151.638645
2 645.647228
EOD
$s40 << EOD
1 760.3744645
2 399.5064375
EOD
$s41 << EOD
1 836.5024505
2 506.5646515
EOD
$s42 << EOD
1 877.4683915
2 502.8989525
EOD
$s43 << EOD
1 1056.464509
2 556.928919
EOD
$s44 << EOD
1 1031.474596
2 545.8364465
EOD
$s45 << EOD
1 698.2226175
2 338.5485365
EOD
$s46 << EOD
1 971.0515635
2 547.0102055
EOD
$s47 << EOD
1 816.010904
2 456.627974
EOD
$s48 << EOD
1 1098.396548
2 1165.091366
EOD
$s49 << EOD
1 935.7118645
2 527.8124185
EOD
$s50 << EOD
1 8.4129835
2 4.699947
EOD
$s51 << EOD
1 9.8673545
2 7.2562675
EOD
$s52 << EOD
1 18.1584265
2 21.9827665
EOD
$s53 << EOD
1 19.849389
2 11.261414
EOD
$s54 << EOD
1 17.6272715
2 9.7323995
EOD
$s55 << EOD
1 14.002118
2 7.6388445
EOD
$s56 << EOD
1 15.701835
2 11.1386695
EOD
$s57 << EOD
1 18.064011
2 15.3922385
EOD
$s58 << EOD
1 20.818816
2 24.4273055
EOD
$s59 << EOD
1 17.022999
2 9.358764
EOD
plot $s0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn5 cpu_onednn b64', $s1 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn5 cpu_tensorflow b64', $s2 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn5 cpu_mxnet b64', $s3 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn5 cpu_libtorch b64', $s4 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn5 cpu_libtorch2 b64', $s5 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn8 cpu_onednn b64', $s6 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn8 cpu_tensorflow b64', $s7 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn8 cpu_mxnet b64', $s8 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn8 cpu_libtorch b64', $s9 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcn8 cpu_libtorch2 b64', $s10 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet cpu_onednn b16', $s11 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet cpu_tensorflow b16', $s12 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet cpu_mxnet b16', $s13 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet cpu_libtorch b16', $s14 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet cpu_libtorch2 b16', $s15 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet50 cpu_onednn b16', $s16 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet50 cpu_tensorflow b16', $s17 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet50 cpu_mxnet b16', $s18 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet50 cpu_libtorch b16', $s19 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet50 cpu_libtorch2 b16', $s20 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm32 cpu_onednn b128', $s21 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm32 cpu_tensorflow b128', $s22 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm32 cpu_mxnet b128', $s23 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm32 cpu_libtorch b128', $s24 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm32 cpu_libtorch2 b128', $s25 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm64 cpu_onednn b128', $s26 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm64 cpu_tensorflow b128', $s27 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm64 cpu_mxnet b128', $s28 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm64 cpu_libtorch b128', $s29 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm64 cpu_libtorch2 b128', $s30 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcnr cpu_onednn b1024', $s31 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcnr cpu_tensorflow b1024', $s32 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcnr cpu_mxnet b1024', $s33 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcnr cpu_libtorch b1024', $s34 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'fcnr cpu_libtorch2 b1024', $s35 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet_r cpu_onednn b1024', $s36 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet_r cpu_tensorflow b1024', $s37 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet_r cpu_mxnet b1024', $s38 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet_r cpu_libtorch b1024', $s39 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'alexnet_r cpu_libtorch2 b1024', $s40 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet56 cpu_onednn b128', $s41 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet56 cpu_tensorflow b128', $s42 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet56 cpu_mxnet b128', $s43 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet56 cpu_libtorch b128', $s44 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'resnet56 cpu_libtorch2 b128', $s45 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm_ptb cpu_onednn b128', $s46 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm_ptb cpu_tensorflow b128', $s47 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm_ptb cpu_mxnet b128', $s48 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm_ptb cpu_libtorch b128', $s49 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lstm_ptb cpu_libtorch2 b128', $s50 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lenet cpu_onednn b64', $s51 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lenet cpu_tensorflow b64', $s52 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lenet cpu_mxnet b64', $s53 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lenet cpu_libtorch b64', $s54 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'lenet cpu_libtorch2 b64', $s55 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'autoencoder cpu_onednn b100', $s56 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'autoencoder cpu_tensorflow b100', $s57 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'autoencoder cpu_mxnet b100', $s58 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'autoencoder cpu_libtorch b100', $s59 using 1:2 with linespoints lw 2 pt 7 ps 0.8 title 'autoencoder cpu_libtorch2 b100'
set terminal pngcairo size 1000,560 font 'sans,10' noenhanced
set output 'bench/results/2026-12-05-frameworks-cpu/report/thread_scaling_E1.png'
replot
set terminal svg size 1000,560 font 'sans,10' noenhanced background rgb 'white'
set output 'bench/results/2026-12-05-frameworks-cpu/report/thread_scaling_E1.svg'
replot
unset output
