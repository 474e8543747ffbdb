Bzero_pointsJm¡n
Y[
ÊG#
