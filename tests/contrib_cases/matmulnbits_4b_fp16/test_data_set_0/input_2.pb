
BscalesJ î,U-¨-l.•)L$*m)b%ý,Ó+¢,4.S,R.Ú-