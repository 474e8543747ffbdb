Bzero_pointsJ§J	uü•ÿ†
